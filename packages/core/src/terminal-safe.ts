/**
 * Terminal-safe text. Results carry the server's words (names, reasons, messages), so nothing a
 * server or a tenant wrote may move the cursor, retitle the window or hide text in a terminal.
 */

// The bidirectional embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) are in every
// set: they reorder what a terminal shows, so a name could make text read other than it is.
// C0 controls except tab and line feed, DEL, the C1 controls, and the bidirectional controls.
const UNSAFE_IN_TEXT = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
// Every control, line breaks and tabs included, the Unicode line and paragraph separators, and the
// bidirectional controls.
const UNSAFE_IN_CELL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
// What JSON.stringify leaves raw but a terminal would act on.
const UNSAFE_IN_JSON = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** A string to print as it is: control characters become spaces; line breaks and tabs stay. */
export function safeText(text: string): string {
  return text
    .replace(/\r\n/g, '\n')
    .replace(UNSAFE_IN_TEXT, ' ')
    .replace(/[\u2028\u2029]/g, '\n');
}

/** A table cell: one line, no control characters at all. */
export function safeCell(text: string): string {
  return text.replace(UNSAFE_IN_CELL, ' ');
}

/** JSON text with DEL, the C1 controls and U+2028/U+2029 escaped as \uXXXX. */
export function safeJson(json: string): string {
  return json.replace(UNSAFE_IN_JSON, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
