import Crypto
import Foundation
import SwiftASN1
import Testing
import X509

@Suite("Trust anchors")
struct TrustAnchorTests {
    static let vectors = TestVectors.directory

    @Test("Apple's roots parse and match the fingerprints index.json records")
    func applesRoots() throws {
        for (file, fingerprint) in [
            ("apple-app-attestation-root-ca.pem", "1cb9823ba28ba6ad2d33a006941de2ae4f513ef1d4e831b9f7e0fa7b6242c932"),
            ("apple-root-ca-g3.pem", "63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179"),
        ] {
            let pem = try String(contentsOf: Self.vectors.appendingPathComponent(file), encoding: .utf8)
            // Apple's G3 PEM wraps its base64 at other than 64 columns, which strict PEM parsers refuse.
            let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
            let der = try #require(Data(base64Encoded: body))
            let certificate = try Certificate(derEncoded: Array(der))
            let digest = SHA256.hash(data: der).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
            #expect(digest == fingerprint)
            #expect(certificate.subject == certificate.issuer)
        }
    }
}
