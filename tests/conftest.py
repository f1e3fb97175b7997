pytest_plugins = ["memgov_pg.testing"]
