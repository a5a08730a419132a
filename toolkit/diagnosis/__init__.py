"""Where quality is lost: loss decomposition, depth curve, query types and views, the diagnosis."""
