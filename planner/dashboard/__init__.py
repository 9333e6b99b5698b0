"""What the Streamlit dashboard (app.py) shows, from the same API as the CLI.

- `view`: cards, badges, header, tooltips and reasons, read from the recommendation record;
- `whatif`: change sets applied to a recommendation and their estimated effect, capacity at the SLO;
- `whatif_view`: what-if cards (deltas coloured by direction), the why, the side-by-side columns;
- `simview`: the time series of a deployment under the plan's traffic (or an uploaded trace);
- `charts`: plotly figures (units on every axis, legends);
- `exports`: downloads including the what-if, trace upload, validation rows;
- `urlstate`: settings in the URL's query parameters.
The page (app.py) only lays these out.
"""
