/// Device attestation verifiers: App Attest, Play Integrity, Firebase App Check. No HTTP, no database.
package enum StepAttestation {}
