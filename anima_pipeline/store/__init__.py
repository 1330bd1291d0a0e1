"""The memory store: PostgreSQL through a psycopg pool, migrations, one repository per table family."""
