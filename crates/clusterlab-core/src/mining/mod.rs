//! Frequent itemset mining (Apriori, FP-growth, Eclat) and association rules.
