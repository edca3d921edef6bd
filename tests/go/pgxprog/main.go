// pgxprog: a PostgreSQL client with github.com/jackc/pgx/v5 (from the Go module
// proxy), for tests/dbclients.rs. The test starts a real PostgreSQL server and builds
// this once per pgx version (the go.mod and go.sum under mods/VERSION).
//
//	pgxprog DSN ROUNDS
//
// Each round runs execs and queries (Exec, Query, QueryRow) on a pgx.Conn and on a
// pgxpool.Pool, some failing on the server (an unknown table, a syntax error, a unique
// violation). The program prints its own truth, one `key=value` a line:
//
//	calls|exec|SQL=N, calls|query|SQL=N   statements run, by the text given to pgx
//	errors|SQL|SQLSTATE=N                 those the server answered with an error
//	notices=N                             notices the server sent (OnNotice)
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var counts = map[string]int{}

func count(kind, sql string, err error) {
	counts[fmt.Sprintf("calls|%s|%s", kind, sql)]++
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		counts[fmt.Sprintf("errors|%s|%s", sql, pg.Code)]++
	} else if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		panic(fmt.Sprintf("%s: %v", sql, err))
	}
}

// db is what a Conn and a Pool both offer.
type db interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func exec(c db, sql string, args ...any) {
	_, err := c.Exec(context.Background(), sql, args...)
	count("exec", sql, err)
}

// query reads every row, then counts the query with the error its rows ended with.
func query(c db, sql string, args ...any) {
	rows, err := c.Query(context.Background(), sql, args...)
	if err == nil {
		for rows.Next() {
		}
		rows.Close()
		err = rows.Err()
	}
	count("query", sql, err)
}

func queryRow(c db, sql string, args ...any) {
	var v any
	err := c.QueryRow(context.Background(), sql, args...).Scan(&v)
	count("query", sql, err)
}

func round(c db, i int) {
	for k := 0; k < 3; k++ {
		exec(c, "INSERT INTO items (name) VALUES ($1)", fmt.Sprintf("item-%d-%d", i, k))
	}
	queryRow(c, "SELECT name FROM items WHERE id = $1", 1)
	queryRow(c, "SELECT name FROM items WHERE id = $1", -1) // no rows: not an error of the server
	query(c, "SELECT id, name FROM items ORDER BY id")
	query(c, "SELECT count(*) FROM items")
	exec(c, "DELETE FROM no_such_table")            // 42P01
	query(c, "SELEKT 1")                            // 42601
	exec(c, "INSERT INTO uniq (k) VALUES (1)")      // 23505 from the second round on
	queryRow(c, "SELECT * FROM no_such_table")      // 42P01
	exec(c, "UPDATE items SET name = name WHERE id < $1", 3)
}

func main() {
	if len(os.Args) < 3 {
		panic("usage: pgxprog DSN ROUNDS")
	}
	dsn := os.Args[1]
	rounds, _ := strconv.Atoi(os.Args[2])
	ctx := context.Background()
	var notices atomic.Int64
	onNotice := func(*pgconn.PgConn, *pgconn.Notice) { notices.Add(1) }
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		panic(err)
	}
	cfg.OnNotice = onNotice
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		panic(err)
	}
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		panic(err)
	}
	pcfg.ConnConfig.OnNotice = onNotice
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		panic(err)
	}
	exec(conn, "DROP TABLE IF EXISTS items, uniq")
	exec(conn, "CREATE TABLE items (id serial PRIMARY KEY, name text)")
	exec(conn, "CREATE TABLE uniq (k int PRIMARY KEY)")
	for i := 0; i < rounds; i++ {
		round(conn, i)
		round(pool, i)
	}
	pool.Close()
	conn.Close(ctx)
	counts["notices"] = int(notices.Load())

	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("%s=%d\n", k, counts[k])
	}
}
