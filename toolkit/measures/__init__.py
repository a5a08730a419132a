"""What each measure is: the registry of families, gains and discounts, ranked lists, trec_eval's families and preference measures, measure names and evaluation settings."""
