from anima_pipeline.cli import app

app()
