"""What Airflow tasks call, and Airflow's side of alerting."""
