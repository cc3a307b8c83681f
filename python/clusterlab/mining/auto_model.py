"""The measured rows of the "auto" model, written by bench/auto_model.py (do not edit).

Features: log10_transactions, log10_frequent_items, log10_support, log10_density. Load average (15.13623046875, 9.47119140625, 7.39208984375) -> (6.6201171875, 8.20703125, 7.5205078125).
"""

ROWS = [
    {"row": "T10I4D100K 1%", "features": [5.0000, 2.5740, -2.0000, -1.6731],
     "cpu_s": {"apriori": 0.0285, "eclat": 0.1264, "fpgrowth": 0.1484, "lcm": 0.1358}, "fastest": "apriori"},
    {"row": "T10I4D100K 0.1%", "features": [5.0000, 2.9015, -3.0000, -1.8987],
     "cpu_s": {"apriori": 0.4078, "eclat": 0.2009, "fpgrowth": 0.3440, "lcm": 0.2702}, "fastest": "eclat"},
    {"row": "T10I4D100K 0.02%", "features": [5.0000, 2.9340, -3.6990, -1.9296],
     "cpu_s": {"apriori": 4.9967, "eclat": 0.5018, "fpgrowth": 0.5855, "lcm": 0.4043}, "fastest": "lcm"},
    {"row": "sparse 11k 0.05%", "features": [5.0000, 3.8100, -3.3010, -2.8539],
     "cpu_s": {"apriori": 1.2625, "eclat": 0.3012, "fpgrowth": 0.2457, "lcm": 0.2488}, "fastest": "fpgrowth"},
    {"row": "sparse 11k 0.02%", "features": [5.0000, 3.9518, -3.6990, -2.9575],
     "cpu_s": {"apriori": 2.5573, "eclat": 0.2685, "fpgrowth": 0.5122, "lcm": 0.4457}, "fastest": "eclat"},
    {"row": "chess 80%", "features": [3.5046, 1.2788, -0.0969, -0.0297],
     "cpu_s": {"apriori": 0.3512, "eclat": 0.0078, "fpgrowth": 0.0143, "lcm": 0.1333}, "fastest": "eclat"},
    {"row": "chess 60%", "features": [3.5046, 1.5315, -0.2218, -0.0819],
     "cpu_s": {"apriori": 9.8526, "eclat": 0.1062, "fpgrowth": 0.1704, "lcm": 1.8928}, "fastest": "eclat"},
    {"row": "mushroom 10%", "features": [3.9098, 1.7482, -0.9997, -0.4233],
     "cpu_s": {"apriori": 13.1576, "eclat": 0.2939, "fpgrowth": 0.2693, "lcm": 0.3504}, "fastest": "fpgrowth"},
    {"row": "seed000-style 1M 0.7%", "features": [6.0000, 2.8235, -2.1549, -2.0385],
     "cpu_s": {"apriori": 0.3245, "eclat": 0.2793, "fpgrowth": 0.2577, "lcm": 0.2637}, "fastest": "fpgrowth"},
    {"row": "seed000 10M 0.7%", "features": [7.0000, 2.9058, -2.1549, -1.8975],
     "cpu_s": {"apriori": 5.9014, "eclat": 6.2221, "fpgrowth": 9.2247, "lcm": 9.9155}, "fastest": "apriori"},
]
