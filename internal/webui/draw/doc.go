// Package draw holds the web view's pictures: server-rendered SVG of the
// fabric (spines, leaf groups and nodes as a tree, coloured by state and
// health verdict), of one node (its `topo -m` matrix, its GPUs' NVLinks,
// its HCA ports and its PCIe tree) and charts (a plan's predicted busbw
// per algorithm, an estimate's scaling per placement class).
//
// Every picture is a pure function of its input: the same input gives
// byte-identical SVG (golden tests hold it). The SVG carries no script, no
// style attribute and no external reference: colours come from class names
// that the web view's stylesheet defines (the page's CSP allows no inline
// style), links are relative <a href> so the pictures work without
// JavaScript, and every drawn node and link carries its name in a data-node
// or data-link attribute for tests and users' scripts. Text is <text>, so
// it stays selectable.
//
// Sizes are bounded where they grow with the cluster: above CollapseAbove
// nodes, leaf groups are drawn as counts (with their faulty and highlighted
// nodes still drawn one by one) unless asked to expand.
package draw
