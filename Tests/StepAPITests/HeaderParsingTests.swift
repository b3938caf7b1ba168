import Foundation
import Testing

@testable import StepAPI

/// The byte-level header helpers that replaced Foundation's string functions on the request path.
@Suite("Header parsing on the request path")
struct HeaderParsingTests {
    @Test(
        "Content-Type is JSON in any case, with parameters and blanks, and nothing else is",
        arguments: [
            ("application/json", true), ("Application/JSON; charset=utf-8", true), ("  application/json \t;x", true),
            ("\tapplication/json", true), ("application/json;", true), ("application/jsonx", false),
            ("application/json-patch+json", false), ("", false), ("text/plain", false), (";application/json", false),
            ("application/ json", false), ("applicätion/json", false), ("application/x-www-form-urlencoded", false),
        ])
    func contentType(value: String, isJSON: Bool) {
        #expect(JSONBody.isJSON(value) == isJSON)
    }

    @Test(
        "optional whitespace is spaces and tabs at either end",
        arguments: [
            (" \t abc \t", "abc"), ("   ", ""), ("", ""), (" é ", "é"), ("a b", "a b"), ("\u{00A0}x", "\u{00A0}x"),
            ("日本 ", "日本"),
        ])
    func trimming(value: String, trimmed: String) {
        #expect(String(value[...].trimmingHTTPWhitespace) == trimmed)
    }

    @Test("base64url decodes the URL alphabet without padding and refuses padding")
    func base64URL() {
        #expect(Base64URL.decode("") == Data())
        #expect(Base64URL.decode("AQ") == Data([1]))
        #expect(Base64URL.decode("-_8") == Data([0xFB, 0xFF]))
        #expect(Base64URL.decode("AQ==") == nil)
        #expect(Base64URL.decode("A") == nil)
        #expect(Base64URL.decode("A!") == nil)
        let bytes = Data((0..<64).map { UInt8($0 * 4 + 1) })
        #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
    }
}
