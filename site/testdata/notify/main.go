// Command notify is a script that only notifies, as a user writes one:
// it opens the site's store with the SDK, sends a notification and asks
// its status. TestSDKLinksFewPackages measures what it links.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/outpost-dev/outpost/site"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: notify /var/lib/outpost/site.db")
	}
	if err := notify(context.Background(), os.Args[1]); err != nil {
		log.Fatal(err)
	}
}

// notify buffers a notification in the store at path and prints its id
// and status.
func notify(ctx context.Context, path string) error {
	c, err := site.Open(ctx, path, site.Options{SiteID: "plant-1", Node: "node-a", Script: "notify"})
	if err != nil {
		return err
	}
	defer c.Close()
	id, err := c.Notify(ctx, "ops", "Pump 3 tripped", "Pressure low on pump 3 at 14:05.")
	if err != nil {
		return err
	}
	st, err := c.Status(ctx, id)
	if err != nil {
		return err
	}
	fmt.Println(id, st.Status)
	return nil
}
