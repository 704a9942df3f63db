"""Pure DataFrame functions shared by stream and batch: parsing, dedup, lateness, keyed subsets."""
