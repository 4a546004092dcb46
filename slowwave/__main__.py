from slowwave.cli import app

app()
