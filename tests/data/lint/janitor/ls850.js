/* purpose-built book for lorescan lint: ls850 */
var APPLY_LIMIT = 6;
var dynamicLore = [
  { keywords: ['harbor', 'pier*'], priority: 4, scenario: 'The harbor.', triggers: ['gull'] },
  { keywords: ['lantern', 'lamp'], scenario: 'Lanterns.' },
  { tag: 'gull', keywords: ['lanterm'], scenario: 'Gulls wheel overhead.' },
];
