
opus-mt-es-en!Y viÃ³ Dios que la luz era buena.š™?@ (