import SQLKit

/// A statement as the store builds it: its text, with a marker where each bind goes, and the binds in order.
///
/// It is written like SQLKit's `SQLQueryString` (`"… \(bind: value) …"`, `+`, `+=`, `joined`), but built by
/// plain string appends: no expression is boxed per literal or per bind, and the unit databases render it in
/// one pass over its bytes (`rendered(_:)`), numbering the placeholders as the engine wants them. The ingest's
/// two PostgreSQL statements hold about seventy binds; built as `SQLText` instead of `SQLQueryString`, an ingest
/// cost `stepd` 0.92 of the CPU (`scripts/bench-ab`, docs/benchmarks.md). Any other `SQLDatabase` serialises it
/// like any expression (`serialize(to:)`), so it runs everywhere a `SQLQueryString` does.
package struct SQLText: Sendable, SQLExpression, ExpressibleByStringInterpolation {
    /// Stands for a bind in `marked`. A NUL cannot appear in a statement's text on either engine.
    static let marker: UInt8 = 0
    private static let markerText = "\u{0}"

    /// The text, with `marker` for each bind.
    package private(set) var marked: String
    package private(set) var binds: [any Encodable & Sendable]

    package init(_ text: String) {
        marked = text
        binds = []
    }

    package init(stringLiteral value: String) {
        self.init(value)
    }

    package init(stringInterpolation: Interpolation) {
        marked = stringInterpolation.text.marked
        binds = stringInterpolation.text.binds
    }

    package struct Interpolation: StringInterpolationProtocol {
        var text: SQLText

        package init(literalCapacity: Int, interpolationCount: Int) {
            text = SQLText("")
            text.marked.reserveCapacity(literalCapacity + 2 * interpolationCount)
            text.binds.reserveCapacity(interpolationCount)
        }

        package mutating func appendLiteral(_ literal: String) {
            text.marked += literal
        }

        /// Inserted as it is: only for text the code chooses (a name, a number it made), never for input.
        package mutating func appendInterpolation(unsafeRaw value: String) {
            text.marked += value
        }

        package mutating func appendInterpolation(bind value: any Encodable & Sendable) {
            text.appendBind(value)
        }

        /// The values as a comma-separated list of binds.
        package mutating func appendInterpolation(binds values: [any Encodable & Sendable]) {
            for (index, value) in values.enumerated() {
                if index > 0 { text.marked += ", " }
                text.appendBind(value)
            }
        }

        package mutating func appendInterpolation(_ other: SQLText) {
            text += other
        }
    }

    private mutating func appendBind(_ value: any Encodable & Sendable) {
        marked += Self.markerText
        binds.append(value)
    }

    package static func + (lhs: SQLText, rhs: SQLText) -> SQLText {
        var result = lhs
        result += rhs
        return result
    }

    package static func += (lhs: inout SQLText, rhs: SQLText) {
        lhs.marked += rhs.marked
        lhs.binds.append(contentsOf: rhs.binds)
    }

    /// How an engine writes the n-th placeholder (from 1).
    package enum Placeholders: Sendable {
        /// `$1`, `$2`, … (PostgreSQL).
        case dollar
        /// `?1`, `?2`, … (SQLite).
        case question
    }

    /// The text the engine runs, with numbered placeholders, and the binds in their order. One pass over the
    /// text's bytes, copying the runs between markers whole.
    package func rendered(_ placeholders: Placeholders) -> (sql: String, binds: [any Encodable & Sendable]) {
        guard !binds.isEmpty else { return (marked, binds) }
        let sign: UInt8 =
            switch placeholders {
            case .dollar: UInt8(ascii: "$")
            case .question: UInt8(ascii: "?")
            }
        var source = marked
        let capacity = source.utf8.count + 6 * binds.count
        let sql = source.withUTF8 { text in
            String(unsafeUninitializedCapacity: capacity) { out in
                var written = 0
                var runStart = 0
                var position = 0
                for index in 0..<text.count where text[index] == Self.marker {
                    let run = UnsafeBufferPointer(rebasing: text[runStart..<index])
                    _ = UnsafeMutableBufferPointer(rebasing: out[written...]).initialize(fromContentsOf: run)
                    written += run.count
                    runStart = index + 1
                    position += 1
                    out[written] = sign
                    written += 1
                    written += Self.writeDecimal(position, to: UnsafeMutableBufferPointer(rebasing: out[written...]))
                }
                let tail = UnsafeBufferPointer(rebasing: text[runStart...])
                _ = UnsafeMutableBufferPointer(rebasing: out[written...]).initialize(fromContentsOf: tail)
                return written + tail.count
            }
        }
        return (sql, binds)
    }

    /// Writes `value` (≥ 1, below a million) in decimal at the start of `out`; returns how many bytes it took.
    private static func writeDecimal(_ value: Int, to out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        var digits = 1
        var bound = 10
        while value >= bound {
            digits += 1
            bound *= 10
        }
        var rest = value
        for index in stride(from: digits - 1, through: 0, by: -1) {
            out[index] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        }
        return digits
    }

    /// For every other `SQLDatabase`: the text through the dialect's placeholders, like any expression.
    package func serialize(to serializer: inout SQLSerializer) {
        var next = binds.makeIterator()
        for (index, piece) in marked.utf8.split(separator: Self.marker, omittingEmptySubsequences: false)
            .enumerated()
        {
            if index > 0, let bind = next.next() { serializer.write(bind: bind) }
            serializer.write(String(decoding: piece, as: UTF8.self))
        }
    }
}

extension Sequence<SQLText> {
    package func joined(separator: String = "") -> SQLText {
        var result = SQLText("")
        for (index, text) in enumerated() {
            if index > 0 { result += SQLText(separator) }
            result += text
        }
        return result
    }
}

/// What a unit of work runs its statements through: `raw(_:)` takes a `SQLText`, so a string literal written
/// there is one (with `SQLKit`'s own `raw(_:)` on the database, a literal makes a `SQLQueryString`).
package struct SQLTextRunner: Sendable {
    /// The unit's connection, for what is not a statement (a nested transaction, a position read).
    package let database: any SQLDatabase

    package init(_ database: any SQLDatabase) {
        self.database = database
    }

    /// The statement as a builder with SQLKit's fetching (`run`, `all`, `first`, …).
    package func raw(_ text: SQLText) -> SQLTextBuilder {
        SQLTextBuilder(text, on: database)
    }
}

/// The builder `SQLTextRunner.raw(_:)` gives.
package final class SQLTextBuilder: SQLQueryBuilder, SQLQueryFetcher {
    package let text: SQLText
    package var database: any SQLDatabase
    package var query: any SQLExpression { text }

    init(_ text: SQLText, on database: any SQLDatabase) {
        self.text = text
        self.database = database
    }
}
