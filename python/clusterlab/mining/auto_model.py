"""The measured rows of the "auto" model, written by bench/auto_model.py (do not edit).

Features: log10_transactions, log10_frequent_items, log10_support, log10_density. Load average (6.75341796875, 24.77490234375, 48.06201171875) -> (2.755859375, 18.60546875, 43.599609375).
"""

ROWS = [
    {"row": "T10I4D100K 1%", "features": [5.0000, 2.5740, -2.0000, -1.6731],
     "cpu_s": {"apriori": 0.0139, "eclat": 0.0318, "fpgrowth": 0.0291, "lcm": 0.0307}, "fastest": "apriori"},
    {"row": "T10I4D100K 0.1%", "features": [5.0000, 2.9015, -3.0000, -1.8987],
     "cpu_s": {"apriori": 0.3026, "eclat": 0.0855, "fpgrowth": 0.1570, "lcm": 0.1216}, "fastest": "eclat"},
    {"row": "T10I4D100K 0.02%", "features": [5.0000, 2.9340, -3.6990, -1.9296],
     "cpu_s": {"apriori": 2.3382, "eclat": 0.2275, "fpgrowth": 0.3614, "lcm": 0.2270}, "fastest": "lcm"},
    {"row": "sparse 11k 0.05%", "features": [5.0000, 3.8100, -3.3010, -2.8539],
     "cpu_s": {"apriori": 0.5601, "eclat": 0.0827, "fpgrowth": 0.1021, "lcm": 0.0893}, "fastest": "eclat"},
    {"row": "sparse 11k 0.02%", "features": [5.0000, 3.9518, -3.6990, -2.9575],
     "cpu_s": {"apriori": 1.1880, "eclat": 0.1192, "fpgrowth": 0.1864, "lcm": 0.1590}, "fastest": "eclat"},
    {"row": "chess 80%", "features": [3.5046, 1.2788, -0.0969, -0.0297],
     "cpu_s": {"apriori": 0.1669, "eclat": 0.0029, "fpgrowth": 0.0056, "lcm": 0.0451}, "fastest": "eclat"},
    {"row": "chess 60%", "features": [3.5046, 1.5315, -0.2218, -0.0819],
     "cpu_s": {"apriori": 4.8867, "eclat": 0.0400, "fpgrowth": 0.0690, "lcm": 0.6893}, "fastest": "eclat"},
    {"row": "mushroom 10%", "features": [3.9098, 1.7482, -0.9997, -0.4233],
     "cpu_s": {"apriori": 5.7057, "eclat": 0.1135, "fpgrowth": 0.1182, "lcm": 0.1760}, "fastest": "eclat"},
    {"row": "seed000-style 1M 0.7%", "features": [6.0000, 2.8235, -2.1549, -2.0385],
     "cpu_s": {"apriori": 0.2329, "eclat": 0.1608, "fpgrowth": 0.1581, "lcm": 0.1676}, "fastest": "fpgrowth"},
]
