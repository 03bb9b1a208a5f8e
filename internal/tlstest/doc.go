// Package tlstest makes the certificates a TLS test needs, at test time:
// a CA, a server certificate for 127.0.0.1 and localhost signed by it,
// client certificates with a given common name, and cluster node
// certificates good for both ends of a mutual-TLS connection, written as
// PEM files into a directory of the test's. Nothing it makes is kept in
// git, and nothing it makes should be trusted outside a test. Only tests
// import it.
package tlstest
