// Command hello is what gobin's own test builds.
package main

import "fmt"

func main() { fmt.Println("hello") }
