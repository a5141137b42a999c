"""MLflow: the client (mlflow_client.py), a parent run per sweep and a child run per
trial (mlflow_runs.py), repair after an outage, no passwords."""
