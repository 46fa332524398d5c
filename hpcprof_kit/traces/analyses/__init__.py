"""What a trace table says: each analysis a function of the table that returns a DataFrame
(breakdown, ops, idle, memory, spread, lanes, HTA's breakdown). No pictures: those are ``plots``.
"""
