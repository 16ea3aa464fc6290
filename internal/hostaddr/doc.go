// Package hostaddr derives the address a server advertises to its peers when
// it is told only to listen on every interface (":5001", "0.0.0.0:5001",
// "[::]:5001"): the source address of the host's default route, else its
// only global unicast address. When neither gives one address it says so,
// so a caller can fail before it touches anything and name the flag that
// sets the address by hand.
package hostaddr
