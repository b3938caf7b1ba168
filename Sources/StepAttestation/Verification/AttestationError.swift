/// Why a piece of attestation evidence was rejected: a kind of failure from the family's `Code` enum, plus context
/// for logs and the anti-cheat sink, never for clients.
///
/// Equality compares the kind of failure only, so tests and callers match on `code` or on `Self(.someCode)`
/// whatever the detail says.
package struct AttestationError<Code: AttestationErrorCode>: Error, Sendable, Hashable, CustomStringConvertible {
    package let code: Code
    /// Extra context for logs (never for clients).
    package let detail: String?
    /// The evidence's own identifier when its issuer's signature held but a claim failed (App Check's `jti`): an
    /// id worth recording because the issuer vouched for it. A forged token carries an attacker's choice, so none.
    package let tokenID: String?

    package init(_ code: Code, detail: String? = nil, tokenID: String? = nil) {
        self.code = code
        self.detail = detail
        self.tokenID = tokenID
    }

    /// The same kind of failure with context attached.
    package func with(detail: String) -> Self {
        Self(code, detail: detail, tokenID: tokenID)
    }

    /// The same failure, naming the token it concerns.
    package func with(tokenID: String?) -> Self {
        Self(code, detail: detail, tokenID: tokenID)
    }

    package var reason: String {
        code.reason
    }

    package var reasonCode: Code.ReasonCode {
        code.reasonCode
    }

    package var description: String {
        if let detail { "\(code): \(code.reason) (\(detail))" } else { "\(code): \(code.reason)" }
    }

    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.code == rhs.code
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(code)
    }
}
