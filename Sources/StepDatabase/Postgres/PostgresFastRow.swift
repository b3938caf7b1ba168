import PostgresKit
import PostgresNIO
import SQLKit

/// A PostgreSQL row as the store reads it: the types the store decodes (integers, text, reals, flags, and
/// optionals of them) straight from the binary cell, everything else through PostgresKit's general
/// `Decodable` path. That path builds a decoder per value; on a read of a thousand rows (a three-year
/// statistics range) it was a third of the server's CPU.
struct PostgresFastRow: SQLRow {
    let row: PostgresRow
    let cells: PostgresRandomAccessRow

    init(_ row: PostgresRow) {
        self.row = row
        cells = PostgresRandomAccessRow(row)
    }

    var allColumns: [String] { row.map(\.columnName) }

    func contains(column: String) -> Bool { cells.contains(column) }

    func decodeNil(column: String) throws -> Bool {
        guard cells.contains(column) else { return try row.sql().decodeNil(column: column) }
        return cells[column].bytes == nil
    }

    func decode<D: Decodable>(column: String, as type: D.Type) throws -> D {
        guard cells.contains(column) else { return try row.sql().decode(column: column, as: type) }
        let cell = cells[column]
        if let value = try? Self.fast(cell, as: type) { return value }
        return try row.sql().decode(column: column, as: type)
    }

    /// nil when the type is not one of the fast ones (the caller then takes the general path).
    private static func fast<D>(_ cell: PostgresCell, as type: D.Type) throws -> D? {
        switch type {
        case is Int.Type: return try cell.decode(Int.self) as? D
        case is String.Type: return try cell.decode(String.self) as? D
        case is Double.Type: return try cell.decode(Double.self) as? D
        case is Bool.Type: return try cell.decode(Bool.self) as? D
        case is Int?.Type: return try cell.decode(Int?.self) as? D
        case is String?.Type: return try cell.decode(String?.self) as? D
        case is Double?.Type: return try cell.decode(Double?.self) as? D
        case is Bool?.Type: return try cell.decode(Bool?.self) as? D
        default: return nil
        }
    }
}
