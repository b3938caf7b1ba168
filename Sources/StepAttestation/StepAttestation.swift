/// Device attestation verifiers: App Attest, Play Integrity, Firebase App Check. No HTTP, no database.
package enum StepAttestation {}

extension String {
    /// `counterNotIncreasing` → `COUNTER_NOT_INCREASING`: failure kinds as audit and metric codes.
    package var upperSnakeCase: String {
        reduce(into: "") { text, character in
            if character.isUppercase, !text.isEmpty { text += "_" }
            text += character.uppercased()
        }
    }
}
