// Command sleeper is a static stand-in for a container's process in
// dockertest's own test: "exit N" prints and exits with N, "wait" blocks.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "exit" {
		n, err := strconv.Atoi(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, "sleeper: bad exit code:", err)
			os.Exit(2)
		}
		fmt.Println("exit", n)
		os.Exit(n)
	}
	for {
		time.Sleep(time.Hour)
	}
}
