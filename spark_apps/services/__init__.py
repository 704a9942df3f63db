"""Processes the platform starts on this machine: Kafka broker, local cluster, Airflow."""
