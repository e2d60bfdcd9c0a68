// Package airgap is the file format of air-gap transfer: the bundle a site
// writes to removable media when it has had no link to central for a long
// time, and the receipt central writes back once it has imported it.
//
// A bundle (format "outpost-airgap-bundle/v1") is one indented JSON
// document. Its header names the site (tenantId), the node that wrote it and
// when; its jobLogs hold, per node, the accepted operations of that node's
// append-only job log in HLC order. Every entry carries its payload
// byte-exact as a JSON string, the SHA-256 of that payload, and a hash-chain
// link, hlc.Link(prevLink, jobId, tHlc, payloadHash), so a changed, removed or
// reordered entry breaks the chain. A log whose earlier entries were pruned
// starts at a checkpoint: the link and HLC of the entry before its first.
//
// The manifest digest is a SHA-256 over a canonical encoding of every log
// (see ManifestDigest), and the bundle is signed with ed25519 in a DSSE
// envelope whose payload is a small JSON statement binding the header and
// the manifest digest: verifying the signature and recomputing the digest
// and every link proves the whole file is as the site wrote it.
//
// A receipt (format "outpost-airgap-receipt/v1") names the bundles central
// imported, every operation it accepted with its state at import, and the
// chain head of every node, so the site can settle its log up to them. It is
// signed the same way, over a digest of its content.
package airgap
