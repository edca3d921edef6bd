// redisprog: a redis client with github.com/redis/go-redis/v9 (from the Go module
// proxy), for tests/dbclients.rs. The test starts a real redis-server and builds this
// once per go-redis version (the go.mod and go.sum under mods/VERSION).
//
//	redisprog SOCKET ROUNDS
//
// Two goroutines each run ROUNDS rounds of commands on one client (its pool of
// connections), some of which the server answers with an error (a value that is not an
// integer, a key of the wrong type, an unknown command), and one GET of a missing key
// (redis.Nil: a nil reply, not an error). The program prints its own truth, one
// `key=value` a line:
//
//	calls|NAME=N            commands sent, by their name as sent (args[0])
//	errors|NAME|-MESSAGE=N  those the server answered with an error line
//	string_args=N           the arguments of those commands that are strings (each
//	                        written as a bulk string, the command's name included)
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

var (
	mu     sync.Mutex
	counts = map[string]int{}
)

// done counts a command the client sent and how the server answered it.
func done(cmd redis.Cmder) {
	name := fmt.Sprint(cmd.Args()[0])
	err := cmd.Err()
	mu.Lock()
	defer mu.Unlock()
	counts["calls|"+name]++
	for _, a := range cmd.Args() {
		if _, ok := a.(string); ok {
			counts["string_args"]++
		}
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		counts[fmt.Sprintf("errors|%s|-%s", name, err.Error())]++
	}
}

func round(c *redis.Client, g, i int) {
	ctx := context.Background()
	k := fmt.Sprintf("k-%d", g)
	done(c.Set(ctx, k, "v"+strconv.Itoa(i), 0))
	done(c.Get(ctx, k))
	done(c.Get(ctx, "missing-key")) // redis.Nil
	done(c.Incr(ctx, fmt.Sprintf("counter-%d", g)))
	done(c.HSet(ctx, fmt.Sprintf("h-%d", g), "f", i, "g", "x"))
	done(c.HGet(ctx, fmt.Sprintf("h-%d", g), "f"))
	done(c.LPush(ctx, fmt.Sprintf("l-%d", g), "a", "b"))
	done(c.LRange(ctx, fmt.Sprintf("l-%d", g), 0, -1))
	done(c.Incr(ctx, k))              // ERR value is not an integer or out of range
	done(c.LPush(ctx, k, "x"))        // WRONGTYPE
	done(c.Do(ctx, "NOSUCHCMD", "a")) // ERR unknown command
	done(c.Del(ctx, fmt.Sprintf("l-%d", g)))
}

func main() {
	if len(os.Args) < 3 {
		panic("usage: redisprog SOCKET ROUNDS")
	}
	rounds, _ := strconv.Atoi(os.Args[2])
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: os.Args[1], Protocol: 2})
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				round(c, g, i)
			}
		}(g)
	}
	wg.Wait()
	c.Close()

	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("%s=%d\n", k, counts[k])
	}
}
