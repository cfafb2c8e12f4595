// Package server is where a query comes in: the client-facing UDP and TCP
// listeners, the Handler interfaces the query path implements, admission
// (the server's and each client's share of the queries in flight),
// batched reads and writes, the destination address of a wildcard socket
// (pktinfo) and shutdown. Its sibling wire/transport is where a query goes
// out.
package server
