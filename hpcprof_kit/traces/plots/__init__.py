"""Every picture of a run, each returning ``Plot(fig, table)``: the figure and the numbers it draws."""
