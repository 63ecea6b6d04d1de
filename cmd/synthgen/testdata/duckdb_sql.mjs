// duckdb_sql.mjs runs the SQL of a file with DuckDB (in memory), from the
// current directory, as `duckdb -c ".read FILE"` would: the worked
// pipeline's examples/qa-keep.sql in cmd/synthgen's TestWorkedPipeline.
//
// Usage: NODE_PATH=/path/to/node_modules node duckdb_sql.mjs FILE
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const [file] = process.argv.slice(2);
if (!file) {
  console.error('usage: node duckdb_sql.mjs FILE');
  process.exit(2);
}
const require = createRequire(import.meta.url);
const { DuckDBInstance } = require('@duckdb/node-api');

const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
await conn.run(readFileSync(file, 'utf8'));
