"""The measured rows of the "auto" model, written by bench/auto_model.py (do not edit).

Features: log10_transactions, log10_frequent_items, log10_support, log10_density. Load average (3.80419921875, 5.1806640625, 4.7705078125) -> (3.84912109375, 4.595703125, 4.6015625).
"""

ROWS = [
    {"row": "T10I4D100K 1%", "features": [5.0000, 2.5740, -2.0000, -1.6731],
     "cpu_s": {"apriori": 0.0137, "eclat": 0.0360, "fpgrowth": 0.0325, "lcm": 0.0322}, "fastest": "apriori"},
    {"row": "T10I4D100K 0.1%", "features": [5.0000, 2.9015, -3.0000, -1.8987],
     "cpu_s": {"apriori": 0.3178, "eclat": 0.0985, "fpgrowth": 0.1690, "lcm": 0.1287}, "fastest": "eclat"},
    {"row": "T10I4D100K 0.02%", "features": [5.0000, 2.9340, -3.6990, -1.9296],
     "cpu_s": {"apriori": 1.7364, "eclat": 0.2431, "fpgrowth": 0.3722, "lcm": 0.2221}, "fastest": "lcm"},
    {"row": "sparse 11k 0.05%", "features": [5.0000, 3.8100, -3.3010, -2.8539],
     "cpu_s": {"apriori": 0.5241, "eclat": 0.0878, "fpgrowth": 0.1127, "lcm": 0.1057}, "fastest": "eclat"},
    {"row": "sparse 11k 0.02%", "features": [5.0000, 3.9518, -3.6990, -2.9575],
     "cpu_s": {"apriori": 1.1150, "eclat": 0.1349, "fpgrowth": 0.2010, "lcm": 0.1761}, "fastest": "eclat"},
    {"row": "chess 80%", "features": [3.5046, 1.2788, -0.0969, -0.0297],
     "cpu_s": {"apriori": 0.2022, "eclat": 0.0034, "fpgrowth": 0.0066, "lcm": 0.0591}, "fastest": "eclat"},
    {"row": "chess 60%", "features": [3.5046, 1.5315, -0.2218, -0.0819],
     "cpu_s": {"apriori": 6.1008, "eclat": 0.0458, "fpgrowth": 0.0794, "lcm": 0.9033}, "fastest": "eclat"},
    {"row": "mushroom 10%", "features": [3.9098, 1.7482, -0.9997, -0.4233],
     "cpu_s": {"apriori": 6.6475, "eclat": 0.1099, "fpgrowth": 0.1191, "lcm": 0.1894}, "fastest": "eclat"},
    {"row": "seed000-style 1M 0.7%", "features": [6.0000, 2.8235, -2.1549, -2.0385],
     "cpu_s": {"apriori": 0.1555, "eclat": 0.1516, "fpgrowth": 0.1543, "lcm": 0.1569}, "fastest": "eclat"},
    {"row": "seed000 10M 0.7%", "features": [7.0000, 2.9058, -2.1549, -1.8975],
     "cpu_s": {"apriori": 2.9596, "eclat": 2.9621, "fpgrowth": 3.0903, "lcm": 3.3841}, "fastest": "apriori"},
]
