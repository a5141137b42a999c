"""MLflow: a parent run per sweep, a child run per trial, repair after an outage, no passwords."""
