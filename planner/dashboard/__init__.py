"""What the Streamlit dashboard (app.py) shows, from the same API as the CLI.

- `view`: cards, badges, header, tooltips and reasons, read from the recommendation record;
- `whatif`: change sets applied to a recommendation and their estimated effect, capacity at the SLO;
- `whatif_view`: what-if cards (deltas coloured by direction), the why, the side-by-side columns;
- `simview`: the time series of a deployment under the plan's traffic (or an uploaded trace);
- `charts`: plotly figures (units on every axis, legends);
- `exports`: downloads including the what-if, trace upload, validation rows;
- `urlstate`: settings in the URL's query parameters;
- `gpu_compare`, `pages`: the "which GPU?" page (`planner compare`) and the validation page.
The page (app.py) only lays these out.
"""

from planner.dashboard.exports import scenario_of
from planner.dashboard.whatif import breakdown
from planner.report.plan_report import table_rows as recommendations_table  # the dashboard's table is the record

__all__ = ["breakdown", "recommendations_table", "scenario_of"]
