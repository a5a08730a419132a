"""The quality of judgments: unjudged holes and their bounds, pooling bias, assessor agreement, label origins.

The origin of merged human and judge labels included; may read the statistics (``toolkit.stats``) to test and
word what it finds.
"""
