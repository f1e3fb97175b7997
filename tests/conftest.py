# memgov_pg.testing: the cluster and databases; tests.attack_helpers: the login roles
pytest_plugins = ["memgov_pg.testing", "tests.attack_helpers"]
