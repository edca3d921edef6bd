// sqlprog: database/sql against a real database, an in-memory SQLite (modernc.org/sqlite,
// pure Go), for the stdlib `sql` library's end-to-end test. It makes a known number of
// each kind of statement and prints its own truth as `key=value` lines.
//
//	sqlprog N    CREATE TABLE once (Exec); N inserts (Exec, through db and a Tx);
//	             N point queries (QueryRow); 1 count query (Query);
//	             1 query of a table that does not exist (it fails);
//	             1 exec of a table that does not exist (it fails)
package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"

	_ "modernc.org/sqlite"
)

const (
	createSQL = "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)"
	insertSQL = "INSERT INTO items (name) VALUES (?)"
	pointSQL  = "SELECT name FROM items WHERE id = ?"
	countSQL  = "SELECT count(*) FROM items"
	badQuery  = "SELECT * FROM no_such_table"
	badExec   = "DELETE FROM no_such_table"
)

func fail(what string, err error) {
	fmt.Fprintln(os.Stderr, what+":", err)
	os.Exit(1)
}

func main() {
	n := 10
	if len(os.Args) > 1 {
		v, err := strconv.Atoi(os.Args[1])
		if err != nil || v < 1 || v > 10000 {
			fmt.Fprintln(os.Stderr, "usage: sqlprog N (1..10000)")
			os.Exit(2)
		}
		n = v
	}
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		fail("open", err)
	}
	// One connection: each connection to ":memory:" is its own database.
	db.SetMaxOpenConns(1)
	ctx := context.Background()

	if _, err := db.ExecContext(ctx, createSQL); err != nil {
		fail("create", err)
	}
	// Half the inserts through the DB, half through one transaction.
	half := n / 2
	for i := 0; i < half; i++ {
		if _, err := db.Exec(insertSQL, fmt.Sprintf("item%d", i)); err != nil {
			fail("insert", err)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		fail("begin", err)
	}
	for i := half; i < n; i++ {
		if _, err := tx.ExecContext(ctx, insertSQL, fmt.Sprintf("item%d", i)); err != nil {
			fail("tx insert", err)
		}
	}
	if err := tx.Commit(); err != nil {
		fail("commit", err)
	}
	for i := 1; i <= n; i++ {
		var name string
		if err := db.QueryRow(pointSQL, i).Scan(&name); err != nil {
			fail("point query", err)
		}
	}
	rows, err := db.QueryContext(ctx, countSQL)
	if err != nil {
		fail("count", err)
	}
	var count int
	for rows.Next() {
		if err := rows.Scan(&count); err != nil {
			fail("scan", err)
		}
	}
	rows.Close()
	if count != n {
		fail("count", fmt.Errorf("%d rows, want %d", count, n))
	}
	queryErrors, execErrors := 0, 0
	if rows, err := db.Query(badQuery); err == nil {
		rows.Close()
		fail("bad query", fmt.Errorf("it did not fail"))
	} else {
		queryErrors++
	}
	if _, err := db.Exec(badExec); err == nil {
		fail("bad exec", fmt.Errorf("it did not fail"))
	} else {
		execErrors++
	}
	db.Close()

	fmt.Printf("creates=1\ninserts=%d\npoint_queries=%d\ncount_queries=1\n", n, n)
	fmt.Printf("query_errors=%d\nexec_errors=%d\n", queryErrors, execErrors)
}
