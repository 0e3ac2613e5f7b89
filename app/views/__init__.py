"""One module per view; each exposes `build(ctx: app.context.LabContext) -> None`."""
