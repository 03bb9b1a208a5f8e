// Package tlsconf owns the TLS listener's settings, as Redis's tls-*
// parameters (tls-cert-file, tls-auth-clients, tls-protocols ...): their
// defaults, their validation, and the tls.Config they load into.
package tlsconf
