/** Where the client's generated method flags live. */
export declare const METHOD_FLAGS_FILE: string;
/** The flags file's text for a method table, formatted as the project's prettier does. */
export declare function renderMethodFlags(
  methods: Record<string, { tenantScoped?: boolean; idempotent?: boolean; access: object }>,
): Promise<string>;
