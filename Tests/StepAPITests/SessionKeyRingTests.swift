import Foundation
import JWTKit
import StepTestSupport
import Testing

@testable import StepAPI

@Suite("Session keys from a JWKS")
struct SessionKeyRingTests {
    /// Keys a key host may publish beside its signing keys, none of which verifies a session token here.
    static let foreignKeys = [
        // An encryption key, by its algorithm (Keycloak publishes one by default) and by its `use` alone.
        #"{"kty":"RSA","kid":"enc-oaep","alg":"RSA-OAEP","use":"enc","n":"uZ8DAIRU","e":"AQAB"}"#,
        #"{"kty":"RSA","kid":"enc-use","use":"enc","n":"uZ8DAIRU","e":"AQAB"}"#,
        // Another curve, a symmetric key, and a key type no one knows.
        #"{"kty":"EC","kid":"p384","crv":"P-384","x":"AAAA","y":"AAAA"}"#,
        #"{"kty":"oct","kid":"hmac","k":"c2VjcmV0"}"#,
        #"{"kty":"PQC","kid":"future"}"#,
    ]

    @Test("keys the server cannot verify with are skipped, the signing keys beside them kept, and tokens verify")
    func foreignKeysSkipped() async throws {
        let keys = try AuthTests.KeySet()
        let signing = keys.jwks.dropFirst(#"{"keys":["#.count).dropLast(2)
        let document = #"{"keys":["# + Self.foreignKeys.joined(separator: ",") + "," + signing + "]}"
        let parsed = try await SessionKeyRing.parse(jwks: Data(document.utf8), origin: "jwt.jwksFile")
        #expect(parsed.map(\.kid) == ["ec-test", "ed-test", "rsa-test"])
        #expect(parsed.map(\.algorithm) == ["ES256", "EdDSA", "RS256"])
        // The kept key verifies a token its private half signed.
        let token = try await keys.collection().sign(AuthTests.Claims(sub: "walker-jwks"), kid: "ec-test")
        let verified = try await parsed[0].collection.verify(token, as: AuthTests.Claims.self)
        #expect(verified.sub == "walker-jwks")
    }

    @Test("a JWKS with no key the server can use is refused, naming what it skipped")
    func nothingUsable() async throws {
        let document = #"{"keys":["# + Self.foreignKeys.joined(separator: ",") + "]}"
        await #expect {
            try await SessionKeyRing.parse(jwks: Data(document.utf8), origin: "jwt.jwksUrl")
        } throws: { error in
            let text = (error as? KeyLoadingError)?.description ?? ""
            return text.hasPrefix("jwt.jwksUrl: the JWKS holds no usable signing key")
                && text.contains("key enc-use: not a signing key (use)")
                && text.contains("key p384: not ES256, RS256 or EdDSA")
        }
        for broken in [#"{"keys":{}}"#, "[]", "not json", #"{"keys":[]}"#] {
            await #expect(throws: KeyLoadingError.self, "\(broken)") {
                try await SessionKeyRing.parse(jwks: Data(broken.utf8), origin: "jwt.jwksFile")
            }
        }
    }
}
