// duckdb_export.mjs reads Parquet files that `synthgen export` wrote with
// DuckDB (no code shared with parquet-go) and prints, as one JSON object:
//
//   {"columns": [{"name", "type"}], "rows": N, "ids": [...], "first": {...}}
//
// Usage: NODE_PATH=/path/to/node_modules node duckdb_export.mjs GLOB
import { createRequire } from 'node:module';

const [glob] = process.argv.slice(2);
if (!glob) {
  console.error('usage: node duckdb_export.mjs GLOB');
  process.exit(2);
}
const require = createRequire(import.meta.url);
const { DuckDBInstance } = require('@duckdb/node-api');
const lit = (s) => `'${String(s).replaceAll("'", "''")}'`;
const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
const query = async (sql) => (await conn.runAndReadAll(sql)).getRowObjectsJson();
const src = `read_parquet(${lit(glob)})`;
const columns = (await query(`DESCRIBE SELECT * FROM ${src}`)).map((r) => ({ name: r.column_name, type: r.column_type }));
const ids = (await query(`SELECT id FROM ${src}`)).map((r) => r.id);
const [first] = await query(`SELECT * FROM ${src} LIMIT 1`);
process.stdout.write(JSON.stringify({ columns, rows: ids.length, ids, first }) + '\n');
