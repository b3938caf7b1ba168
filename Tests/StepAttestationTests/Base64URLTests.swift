import Foundation
import StepAttestation
import Testing

/// The one base64url of every target: JOSE segments, session tokens, cursors, nonces.
@Suite("Base64url")
struct Base64URLTests {
    @Test("Decodes the URL alphabet without padding")
    func decodes() {
        #expect(Base64URL.decode("") == Data())
        #expect(Base64URL.decode("AQ") == Data([1]))
        #expect(Base64URL.decode("AQI") == Data([1, 2]))
        #expect(Base64URL.decode("AQID") == Data([1, 2, 3]))
        #expect(Base64URL.decode("-_8") == Data([0xFB, 0xFF]))
        #expect(Base64URL.decode("AQID"[...]) == Data([1, 2, 3]))
    }

    @Test(
        "Refuses padding, the standard alphabet's + and /, whitespace, other characters and impossible lengths",
        arguments: ["AQ==", "AQ=", "A", "AQIDB", "A!", "+_8", "-/8", "AQ ID", " AQ", "AQ\n", "AQ.I", "Añ"]
    )
    func refuses(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test(
        "Refuses a last character with bits set beyond the data, so no byte string has two spellings",
        arguments: ["AR", "AB", "AP", "AQJ", "AQL", "_x", "__9"]
    )
    func refusesNonCanonical(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test("Accepts the canonical last characters: AQ is [1], AQI is [1, 2], _w is [255], __8 is [255, 255]")
    func acceptsCanonical() {
        #expect(Base64URL.decode("AQ") == Data([1]))
        #expect(Base64URL.decode("AQI") == Data([1, 2]))
        #expect(Base64URL.decode("_w") == Data([255]))
        #expect(Base64URL.decode("__8") == Data([255, 255]))
    }

    @Test("Encodes without padding, using - and _", arguments: 0..<8)
    func paddingFree(length: Int) {
        let bytes = Data((0..<length).map { UInt8(0xF8 + $0) })
        let text = Base64URL.encode(bytes)
        #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
        #expect(text.utf8.count == (length * 4 + 2) / 3)
    }

    @Test("Round-trips every byte value and every length up to 66")
    func roundTrips() {
        let every = Data((0...255).map { UInt8($0) })
        #expect(Base64URL.decode(Base64URL.encode(every)) == every)
        for length in 0...66 {
            let bytes = Data((0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 251) })
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes, "length \(length)")
        }
    }

    @Test("Agrees with Foundation's base64 once the alphabet is swapped and the padding dropped")
    func matchesFoundation() {
        let bytes = Data([0xFB, 0xEF, 0xBE, 0x00, 0xFF, 0x3E, 0x3F])
        let expected = bytes.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        #expect(Base64URL.encode(bytes) == expected)
        #expect(Base64URL.encode(bytes) == "----AP8-Pw")
    }
}
