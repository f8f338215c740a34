#!/bin/sh
# Temporal's PostgreSQL schemas for docker-compose.yml's temporal-schema
# service (temporalio/admin-tools image): create both databases if missing,
# then apply every versioned schema update. Re-running only applies what is new.
set -eu
schema_dir=/etc/temporal/schema/postgresql/v12
for database in temporal temporal_visibility; do
  case $database in
    temporal) versions=$schema_dir/temporal/versioned ;;
    temporal_visibility) versions=$schema_dir/visibility/versioned ;;
  esac
  temporal-sql-tool --db "$database" create || echo "database $database exists"
  temporal-sql-tool --db "$database" setup-schema -v 0.0 || echo "database $database already has a schema"
  temporal-sql-tool --db "$database" update-schema -d "$versions"
done
echo "Temporal schemas are up to date"
