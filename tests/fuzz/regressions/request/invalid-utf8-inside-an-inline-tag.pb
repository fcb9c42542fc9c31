
opus-mt-es-enHola <a href="ê]">mundo</a>.P