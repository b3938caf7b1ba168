/// The decoded CBOR assertion object: `{signature, authenticatorData}`.
package struct AppAttestAssertion: Sendable {
    package let signature: [UInt8]
    package let authenticatorData: AuthenticatorData

    package init(bytes: [UInt8]) throws(AppAttestError) {
        let root = try CBORDecoder().decode(bytes, orThrow: .malformedAssertion)
        guard root.mapEntries != nil, let signature = root["signature"]?.byteString,
            let authData = root["authenticatorData"]?.byteString
        else {
            throw AppAttestError(.malformedAssertion, detail: "signature or authenticatorData missing")
        }
        self.signature = signature
        self.authenticatorData = try AuthenticatorData(bytes: authData, layout: .assertion)
    }
}
