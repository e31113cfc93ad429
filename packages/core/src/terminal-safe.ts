/**
 * Terminal-safe text. Results carry the server's words (names, reasons, messages), so nothing a
 * server or a tenant wrote may move the cursor, retitle the window or hide text in a terminal.
 */

// C0 controls except tab and line feed, DEL, and the C1 controls.
const UNSAFE_IN_TEXT = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;
// Every control, line breaks and tabs included, and the Unicode line and paragraph separators.
const UNSAFE_IN_CELL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;
// What JSON.stringify leaves raw but a terminal would act on.
const UNSAFE_IN_JSON = /[\u007f-\u009f\u2028\u2029]/g;

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
